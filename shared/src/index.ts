// Everything shared, in one import. Modules svcctl loads import the light parts by subpath
// instead (@svc/shared/errors, /clock, /ids, /xid-catalog, /address-class, /ssh-key): the whole package brings the
// config schema library and the logger, which would double the CLI's start-up time.
export * from './errors.js';
export * from './clock.js';
export * from './ids.js';
export * from './logger.js';
export * from './config.js';
export * from './xid-catalog.js';
export * from './client-network.js';
export * from './address-class.js';
export * from './ssh-key.js';
