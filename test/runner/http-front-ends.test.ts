import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpEndpointPickers, preflightBody } from '../../lib/runner/http-front-ends.ts';
import { tempDir } from '../temp.ts';

describe('the EPP metrics port', () => {
  let server: Server;
  let url = '';
  const seen: (string | undefined)[] = [];
  const tokenFile = join(tempDir('lab-sa-'), 'token');

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.headers.authorization);
      if (req.headers.authorization === 'Bearer allowed')
        res.writeHead(200).end('inference_extension_prefix_indexer_size 7\n');
      else
        res.writeHead(403).end('Authorization denied for user system:serviceaccount:vllm:lab-study-runner');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('sends the ServiceAccount token, re-read for every scrape (the kubelet rotates it)', async () => {
    const pickers = new HttpEndpointPickers(tokenFile, 5_000);
    writeFileSync(tokenFile, 'allowed\n');
    expect(await pickers.metrics(url)).toBe('inference_extension_prefix_indexer_size 7\n');
    writeFileSync(tokenFile, 'rotated');
    await expect(pickers.metrics(url)).rejects.toThrow(
      `GET ${url}/metrics answered HTTP 403 (the runner ServiceAccount needs a ClusterRole with nonResourceURLs ["/metrics"], verbs ["get"]): Authorization denied for user system:serviceaccount:vllm:lab-study-runner`,
    );
    expect(seen).toEqual(['Bearer allowed', 'Bearer rotated']);
  });
});

describe('the preflight request', () => {
  it('asks for one token over the arm’s API, the prompt as the benchmark client sends it', () => {
    expect(preflightBody('completions', 'qwen3')).toEqual({
      model: 'qwen3',
      prompt: 'Say OK.',
      max_tokens: 1,
    });
    expect(preflightBody('chat', 'qwen3')).toEqual({
      model: 'qwen3',
      messages: [{ role: 'user', content: 'Say OK.' }],
      max_tokens: 1,
    });
  });
});
