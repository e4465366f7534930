// In-process notifications that cached state is stale. A revoke or an org edit made
// in this process takes effect at once; another process (svcctl) relies on cache expiry.
import { EventEmitter } from 'node:events';

interface ChangeEvents {
  key: [keyId: string];
  org: [orgId: string];
}

export class ChangeFeed extends EventEmitter<ChangeEvents> {}
