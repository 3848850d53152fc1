import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileOf, loadManifestFolder, loadManifests, ManifestLoadError } from '../../lib/check/index.ts';
import { nameOf } from '../../lib/check/manifest.ts';
import { tempDir } from '../temp.ts';

async function folder(files: Record<string, string>): Promise<string> {
  const dir = tempDir('lab-check-');
  for (const [path, content] of Object.entries(files)) {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  return dir;
}

describe('loading a folder of manifests', () => {
  it('reads multi-document YAML, nested folders, JSON and List kinds, remembering each file', async () => {
    const dir = await folder({
      'a.yaml':
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\n---\n',
      'jobs/deep/b.yml': 'apiVersion: batch/v1\nkind: Job\nmetadata: {name: three}\n',
      'c.json': JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [{ apiVersion: 'v1', kind: 'Service', metadata: { name: 'four' } }],
      }),
      'notes.txt': 'not a manifest',
    });
    const objects = await loadManifests(dir);
    expect(objects.map(nameOf)).toEqual(['one', 'two', 'four', 'three']);
    expect(fileOf(objects[3])).toBe(join(dir, 'jobs/deep/b.yml'));
  });

  it('skips documents that are not Kubernetes objects, and says so', async () => {
    const dir = await folder({
      'prerequisites.json': '{"urls": []}',
      'x.yaml': 'apiVersion: v1\nkind: Namespace\nmetadata: {name: vllm}\n',
    });
    const result = await loadManifestFolder(dir);
    expect(result.objects).toHaveLength(1);
    expect(result.skipped).toEqual([
      { file: join(dir, 'prerequisites.json'), reason: 'not a Kubernetes object (no apiVersion and kind)' },
    ]);
  });

  it('fails on bad YAML with the file name and the line', async () => {
    const dir = await folder({
      'broken.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [unclosed\n',
    });
    const error = await loadManifests(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ManifestLoadError);
    expect((error as Error).message).toMatch(
      new RegExp(`^${join(dir, 'broken.yaml')}: not valid YAML: .*at line \\d+, column \\d+`, 's'),
    );
  });

  it('fails clearly on a missing folder', async () => {
    await expect(loadManifests('/no/such/folder')).rejects.toThrow('/no/such/folder: no such folder');
  });
});
