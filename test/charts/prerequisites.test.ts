import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { runLab } from '../../lib/cli/program.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { afterApplyCommands, installCommand, prerequisites } from '../../lib/prereqs/prerequisites.ts';
import { captureOutput } from '../cli/capture.ts';
import { tempDir } from '../temp.ts';

const GAIE_CRDS =
  'https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/v1.0.1/manifests.yaml';

describe('prerequisites', () => {
  test('the default lab needs only the GAIE CRDs of its pinned release', () => {
    const { prerequisites: list, afterApply } = prerequisites(parseLabConfig({}));
    expect(list.map((p) => p.id)).toEqual(['gaie-crds']);
    expect(installCommand(list[0])).toBe(`kubectl apply --server-side -f ${GAIE_CRDS}`);
    expect(afterApply).toEqual([]);
  });

  test('the URL follows gaie.version', () => {
    const [gaie] = prerequisites(parseLabConfig({ gaie: { version: 'v1.0.2' } })).prerequisites;
    expect(gaie.kind === 'manifest' && gaie.url).toContain('/releases/download/v1.0.2/');
  });

  test('the ai-gateway arm adds Envoy Gateway and AI Gateway after the GAIE CRDs', () => {
    const list = prerequisites(parseLabConfig({ study: { optionalArms: ['ai-gateway'] } })).prerequisites;
    expect(list.map((p) => p.id)).toEqual(['gaie-crds', 'envoy-gateway', 'ai-gateway-crds', 'ai-gateway']);
    expect(installCommand(list[1])).toBe(
      'kubectl apply --server-side -f https://github.com/envoyproxy/gateway/releases/download/v1.8.1/install.yaml',
    );
    // As the AI Gateway's installation guide for v1.1 names them: CRD chart first, then the controller.
    expect(installCommand(list[2])).toBe(
      'helm upgrade --install aieg-crd oci://docker.io/envoyproxy/ai-gateway-crds-helm --version v1.1.0 --namespace envoy-ai-gateway-system --create-namespace',
    );
    expect(installCommand(list[3])).toBe(
      'helm upgrade --install aieg oci://docker.io/envoyproxy/ai-gateway-helm --version v1.1.0 --namespace envoy-ai-gateway-system --create-namespace',
    );
    expect(list[3].unconfirmed).toBeTruthy();
  });

  test('the ai-gateway arm restarts Envoy Gateway after the lab writes its configuration', () => {
    const { afterApply } = prerequisites(parseLabConfig({ study: { optionalArms: ['ai-gateway'] } }));
    expect(afterApply).toEqual([
      expect.objectContaining({
        kind: 'rollout-restart',
        id: 'restart-envoy-gateway',
        after: '70-ai-gateway-config',
        namespace: 'envoy-gateway-system',
        deployment: 'envoy-gateway',
      }),
    ]);
    expect(afterApplyCommands(afterApply[0])).toEqual([
      'kubectl -n envoy-gateway-system rollout restart deployment/envoy-gateway',
      'kubectl -n envoy-gateway-system rollout status deployment/envoy-gateway --timeout=5m',
    ]);
  });
});

describe('lab prereqs', () => {
  test('prints the install commands in order', async () => {
    const { value: code, stdout } = await captureOutput(() => runLab(['prereqs']));
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines.filter((l) => !l.startsWith('#'))).toEqual([`kubectl apply --server-side -f ${GAIE_CRDS}`]);
  });

  test('prints the steps that go between the lab files, after the file they follow', async () => {
    const dir = tempDir('lab-prereqs-');
    const file = join(dir, 'lab.yaml');
    writeFileSync(file, 'study:\n  optionalArms: [ai-gateway]\n');
    const { value: code, stdout: text } = await captureOutput(() => runLab(['--config', file, 'prereqs']));
    expect(code).toBe(0);
    expect(text).toContain('# Restart Envoy Gateway, right after applying 70-ai-gateway-config.yaml:');
    expect(text).toContain('kubectl -n envoy-gateway-system rollout restart deployment/envoy-gateway');
    expect(text.indexOf('rollout restart')).toBeGreaterThan(text.indexOf('kubectl apply --server-side'));
  });

  test('--json prints the list synth writes', async () => {
    const { value: code, stdout } = await captureOutput(() => runLab(['prereqs', '--json']));
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toEqual(prerequisites(parseLabConfig({})));
  });
});
