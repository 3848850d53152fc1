import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { filePath, listResults, resultsHandler } from '../../lib/runner/results-server.ts';
import { tempDir } from '../temp.ts';

async function serve(root: string) {
  const server = createServer(resultsHandler(root));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('the results server', () => {
  it('lists every file and serves each as base64 text, bytes intact', async () => {
    const root = tempDir('lab-results-server-');
    mkdirSync(join(root, 'studies', 's1'), { recursive: true });
    writeFileSync(join(root, 'status.json'), '{"state":"running"}\n');
    const bytes = Buffer.from([0, 255, 10, 0xe2, 0x82]);
    writeFileSync(join(root, 'studies', 's1', 'odd.bin'), bytes);
    const { url, close } = await serve(root);
    try {
      const list = await fetch(`${url}/list`);
      expect(list.headers.get('content-type')).toMatch(/^text\/plain/);
      const { files, unreadable } = (await list.json()) as {
        files: { path: string; size: number }[];
        unreadable: string[];
      };
      expect(unreadable).toEqual([]);
      expect(files.map((f) => [f.path, f.size])).toEqual([
        ['status.json', 20],
        ['studies/s1/odd.bin', 5],
      ]);
      const got = await fetch(`${url}/${filePath('studies/s1/odd.bin')}`);
      expect(Buffer.from(await got.text(), 'base64')).toEqual(bytes);
      expect(filePath('studies/s1/odd.bin')).toMatch(/^file-[A-Za-z0-9_-]+$/);
    } finally {
      await close();
    }
  });

  it('serves nothing outside its folder and writes nothing', async () => {
    const root = tempDir('lab-results-server-');
    writeFileSync(join(root, 'status.json'), '{}');
    const { url, close } = await serve(root);
    try {
      expect((await fetch(`${url}/${filePath('../../etc/passwd')}`)).status).toBe(404);
      expect((await fetch(`${url}/${filePath('/etc/passwd')}`)).status).toBe(404);
      expect((await fetch(`${url}/${filePath('missing.json')}`)).status).toBe(404);
      expect((await fetch(`${url}/list`, { method: 'POST', body: 'x' })).status).toBe(405);
      expect(await (await fetch(`${url}/healthz`)).text()).toBe('ok');
    } finally {
      await close();
    }
  });
});

describe('the results server listing', () => {
  it('names a folder it cannot read instead of leaving it out silently', () => {
    const root = tempDir('lab-results-server-');
    writeFileSync(join(root, 'status.json'), '{}');
    expect(listResults(join(root, 'missing'))).toEqual({ files: [], unreadable: ['.'] });
    expect(listResults(root).files.map((f) => f.path)).toEqual(['status.json']);
  });
});
