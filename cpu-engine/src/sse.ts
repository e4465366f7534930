// Server-sent events framing for streamed chat completions (OpenAI wire
// format): one `data: <json>` event per chunk, ended by `data: [DONE]`.

export function sseEvent(payload: unknown): string {
  // JSON.stringify never emits a raw newline, so one data line is always enough.
  return `data: ${JSON.stringify(payload)}\n\n`;
}

export const SSE_DONE = 'data: [DONE]\n\n';

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  // Proxies (nginx) must not buffer the stream.
  'x-accel-buffering': 'no',
} as const;

/** Splits a received SSE body into its data payloads (for tests and clients). */
export function parseSseData(body: string): string[] {
  return body
    .split('\n\n')
    .filter((event) => event.trim().length > 0)
    .map((event) =>
      event
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n'),
    );
}
