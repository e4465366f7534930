// Logs through pino, with credentials redacted before anything is written: JSON lines for
// collectors, or pino-pretty's coloured one-liners for a person at a terminal. `auto`
// (the default of SVC_LOG_FORMAT) picks pretty when the destination is a TTY.
import { Writable } from 'node:stream';
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

/**
 * What pino-pretty passes through to a terminal as itself: C1 controls (U+0080-U+009F, which
 * some terminals act on as escape sequences) and Unicode's bidirectional controls, which
 * reorder what is shown. Logs quote tenants' text (a registry's error, a webhook's URL);
 * pino-pretty already strips C0 controls from messages and JSON-escapes them in fields.
 */
const TERMINAL_UNSAFE = /[\u0080-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** `destination` behind a writer that shows TERMINAL_UNSAFE characters as `\uXXXX`. */
function inertTo(destination: NodeJS.WritableStream): NodeJS.WritableStream {
  const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  return new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      destination.write(String(chunk).replace(TERMINAL_UNSAFE, escape));
      done();
    },
  });
}

/** pino-pretty in front of `destination`, for a person reading it. */
function prettyStream(destination: NodeJS.WritableStream & { isTTY?: boolean }): DestinationStream {
  // sync: a line is on the terminal before the process can exit; colours only on a real TTY.
  return pretty({ destination: inertTo(destination), sync: true, colorize: destination.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
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
