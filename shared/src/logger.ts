// JSON logs through pino, with credentials redacted before anything is written.
import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger };

/** Paths pino censors wherever they appear in a log object. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'headers.authorization',
  'authorization',
  'key',
  'secret',
  'token',
  'password',
  '*.key',
  '*.secret',
  '*.token',
  '*.password',
  '*.authorization',
];

export function loggerOptions(level: string, name: string): LoggerOptions {
  return {
    name,
    level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
}

export function createLogger(level: string, name: string, destination?: NodeJS.WritableStream): Logger {
  return destination ? pino(loggerOptions(level, name), destination) : pino(loggerOptions(level, name));
}
