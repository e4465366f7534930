import { describe, expect, it } from 'vitest';
import { dockerMessage, isNotRunning, pullFailed, pullMessage, taskFailed } from './docker-errors.js';

// Shaped like dockerode's errors: message prefixed with the HTTP code, Docker's text in json.
const dockerError = (statusCode: number, text: string, json = true) =>
  Object.assign(new Error(`(HTTP code ${statusCode}) unexpected - ${text} `), {
    statusCode,
    json: json ? { message: text } : null,
  });

describe('docker errors', () => {
  it("keeps Docker's own message, with or without a JSON body", () => {
    expect(dockerMessage(dockerError(404, 'No such container: abc'))).toBe('No such container: abc');
    expect(dockerMessage(dockerError(404, 'manifest for x:1 not found: manifest unknown', false))).toBe(
      'manifest for x:1 not found: manifest unknown',
    );
    expect(dockerMessage(new Error('connect ENOENT /var/run/docker.sock'))).toBe('connect ENOENT /var/run/docker.sock');
  });

  it('tells permanent pull failures from ones worth retrying', () => {
    expect(pullFailed('x:1', dockerError(404, 'manifest unknown', false)).recoverable).toBe(false);
    expect(pullFailed('x:1', new Error('unauthorized: authentication required')).recoverable).toBe(false);
    const down = pullFailed('x:1', dockerError(500, 'Get "http://r/v2/": dial tcp: connect: connection refused', false));
    expect(down).toMatchObject({ code: 'pull_failed', recoverable: true });
    expect(down.message).toBe('pull of x:1 failed: Get "http://r/v2/": dial tcp: connect: connection refused');
  });

  it('retries create/start only when the engine was not reached', () => {
    expect(taskFailed('start_failed', 'start c', dockerError(400, 'executable file not found')).recoverable).toBe(false);
    expect(taskFailed('create_failed', 'create c', new Error('socket hang up')).recoverable).toBe(true);
  });

  it('reads "not running" from kill (409) and stop (304)', () => {
    expect(isNotRunning(dockerError(409, 'Container abc is not running'))).toBe(true);
    expect(isNotRunning(Object.assign(new Error('container already stopped'), { statusCode: 304 }))).toBe(true);
    expect(isNotRunning(dockerError(409, 'Container abc is paused, unpause the container before stop or kill'))).toBe(false);
  });
});

describe('pullMessage', () => {
  it.each([
    [
      // As Docker 20.10 reported a pull from an HTTP server on the host's loopback.
      'error parsing HTTP 404 response body: invalid character \'<\' looking for beginning of value: "<!DOCTYPE HTML>\\n<html lang=\\"en\\">\\n<title>Error response</title>\\n</html>\\n"',
      "error parsing HTTP 404 response body: invalid character '<' looking for beginning of value (body not shown)",
    ],
    ['Get "https://10.0.0.5/v2/": dial tcp 10.0.0.5:443: connect: connection refused', 'Get "https://10.0.0.5/v2/": dial tcp 10.0.0.5:443: connect: connection refused'],
    ['manifest for 127.0.0.1:5000/svc/nothing:1 not found: manifest unknown: manifest unknown', 'manifest for 127.0.0.1:5000/svc/nothing:1 not found: manifest unknown: manifest unknown'],
  ])('%s', (docker, passed) => {
    expect(pullMessage(docker)).toBe(passed);
  });

  it('cuts what is left past 400 characters', () => {
    expect(pullMessage(`unknown: ${'x'.repeat(1000)}`)).toHaveLength(401);
  });
});
