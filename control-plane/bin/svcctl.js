#!/usr/bin/env node
// svcctl runs from TypeScript source through tsx, like the rest of the stack.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/svcctl.ts');
