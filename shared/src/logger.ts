// Logs through pino, with credentials redacted before anything is written: JSON lines for
// collectors, or pino-pretty's coloured one-liners for a person at a terminal. `auto`
// (the default of SVC_LOG_FORMAT) picks pretty when the destination is a TTY.
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

export const LOG_FORMATS = ['auto', 'pretty', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

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

/** `auto` is pretty on a terminal and JSON anywhere else (a pipe, a file, a log collector). */
export function resolveLogFormat(format: LogFormat, destination: { isTTY?: boolean }): 'pretty' | 'json' {
  if (format !== 'auto') return format;
  return destination.isTTY === true ? 'pretty' : 'json';
}

/** pino-pretty in front of `destination`, for a person reading it. */
function prettyStream(destination: NodeJS.WritableStream & { isTTY?: boolean }): DestinationStream {
  // sync: a line is on the terminal before the process can exit; colours only on a real TTY.
  return pretty({ destination, sync: true, colorize: destination.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
}

/** Fastify's `logger` option: pino's options, plus pino-pretty on stdout when that is the format. */
export function fastifyLoggerOptions(level: string, name: string, format: LogFormat = 'auto'): LoggerOptions & { stream?: DestinationStream } {
  const options = loggerOptions(level, name);
  return resolveLogFormat(format, process.stdout) === 'pretty' ? { ...options, stream: prettyStream(process.stdout) } : options;
}

/** A logger to `destination` (stdout when absent: pino's own fast writer for JSON). */
export function createLogger(level: string, name: string, destination?: NodeJS.WritableStream & { isTTY?: boolean }, format: LogFormat = 'auto'): Logger {
  const options = loggerOptions(level, name);
  if (resolveLogFormat(format, destination ?? process.stdout) === 'pretty') return pino(options, prettyStream(destination ?? process.stdout));
  return destination ? pino(options, destination) : pino(options);
}
