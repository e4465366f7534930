import { describe, expect, it } from 'vitest';
import { parseArgs, UsageError } from './args.js';

describe('parseArgs', () => {
  it('fills the documented defaults', () => {
    expect(parseArgs(['--model', '/models/tiny-chat-q4_0.gguf'])).toEqual({
      model: '/models/tiny-chat-q4_0.gguf',
      servedModelName: 'tiny-chat-q4_0',
      task: 'generate',
      host: '0.0.0.0',
      port: 8000,
      threads: 1,
      ctxSize: undefined,
      parallel: 4,
      apiKey: undefined,
      tokenTimeoutMs: 5_000,
      maxGrammarAmbiguity: 64,
    });
  });

  it.each([
    ['no key anywhere: open', ['--model', 'm'], {}, undefined],
    ['--api-key', ['--model', 'm', '--api-key', 'k1'], {}, 'k1'],
    ['SVC_ENGINE_API_KEY', ['--model', 'm'], { SVC_ENGINE_API_KEY: 'k2' }, 'k2'],
    ['--api-key wins over the environment', ['--model', 'm', '--api-key=k1'], { SVC_ENGINE_API_KEY: 'k2' }, 'k1'],
    ['an empty SVC_ENGINE_API_KEY is no key', ['--model', 'm'], { SVC_ENGINE_API_KEY: '' }, undefined],
  ])('API key: %s', (_name, argv, env, expected) => {
    expect((parseArgs(argv, env) as { apiKey: unknown }).apiKey).toBe(expected);
  });

  it('takes every flag, as `--flag value` or `--flag=value`', () => {
    expect(
      parseArgs(['--model=/m.gguf', '--served-model-name', 'e5', '--task', 'embed', '--host=127.0.0.1', '--port', '0', '--threads', '2', '--ctx-size=256', '--parallel', '8', '--token-timeout-ms', '250', '--max-grammar-ambiguity=1000']),
    ).toEqual({ model: '/m.gguf', servedModelName: 'e5', task: 'embed', host: '127.0.0.1', port: 0, threads: 2, ctxSize: 256, parallel: 8, tokenTimeoutMs: 250, maxGrammarAmbiguity: 1000 });
  });

  it('answers help for --help and -h', () => {
    expect(parseArgs(['--help'])).toBe('help');
    expect(parseArgs(['--model', 'x', '-h'])).toBe('help');
  });

  it.each([
    [[], /--model <path.gguf> is required/],
    [['--model'], /--model needs a value/],
    [['--model', '--port', '1'], /--model needs a value/],
    [['--model='], /--model needs a value/],
    [['--model', 'm', '--bogus', '1'], /unknown flag --bogus/],
    [['--model', 'm', 'extra'], /unexpected argument "extra"/],
    [['--model', 'm', '--model', 'n'], /--model given twice/],
    [['--model', 'm', '--task', 'classify'], /--task must be generate or embed/],
    [['--model', 'm', '--port', 'http'], /--port must be a whole number/],
    [['--model', 'm', '--port', '70000'], /--port must be between 0 and 65535/],
    [['--model', 'm', '--threads', '0'], /--threads must be between 1/],
    [['--model', 'm', '--parallel', '-1'], /--parallel must be a whole number/],
    [['--model', 'm', '--ctx-size', '1.5'], /--ctx-size must be a whole number/],
    [['--model', 'm', '--api-key'], /--api-key needs a value/],
    [['--model', 'm', '--api-key='], /--api-key needs a value/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseArgs(argv)).toThrow(UsageError);
    expect(() => parseArgs(argv)).toThrow(message);
  });
});
