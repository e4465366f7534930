export * from './errors.js';
export * from './clock.js';
export * from './ids.js';
export * from './logger.js';
export * from './config.js';
export * from './xid-catalog.js';
