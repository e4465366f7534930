// Notices that cached state is stale. A revoke or an org edit made in this process is
// emitted here at once; on PostgreSQL every process also hears every change committed by
// any process (the store's NOTIFY, wired in app.ts), so a revoke through one replica (or
// svcctl) takes effect on all of them within moments. `reset`: notices may have been
// missed (the listening connection dropped), so everything cached is stale.
import { EventEmitter } from 'node:events';

interface ChangeEvents {
  key: [keyId: string];
  org: [orgId: string];
  reset: [];
}

export class ChangeFeed extends EventEmitter<ChangeEvents> {}
