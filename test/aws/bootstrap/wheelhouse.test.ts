import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { routerStartScript, routerWheelhouse } from '../../../charts/routers.ts';
import { BOOTSTRAP_SOURCES, renderSettings } from '../../../lib/aws/bootstrap/bootstrap.ts';
import { parseLabConfig } from '../../../lib/config/load.ts';
import { makeSandbox, type Sandbox } from './sandbox.ts';

/**
 * The bootstrap stages vllm-router's wheelhouse (steps/06-prefetch.sh stage_router_wheelhouse):
 * pip runs in the router's pinned image, the wheels land in the host folder the router mounts,
 * and any failure is logged, never fatal.
 */

const config = parseLabConfig({});
const version = config.router.version;
const IMAGE_REF = `docker.io/library/${config.router.image}`;

/** Sources the helpers and the step with the lab's settings, then runs `stage_router_wheelhouse`. */
function stage(box: Sandbox, env: Record<string, string> = {}) {
  const settings = box.relocate(renderSettings(config));
  writeFileSync(join(box.root, 'settings.env'), settings);
  const result = box.run(
    [
      `source '${join(box.root, 'settings.env')}'`,
      `source '${join(BOOTSTRAP_SOURCES, 'helpers.sh')}'`,
      `source '${join(BOOTSTRAP_SOURCES, 'steps', '06-prefetch.sh')}'`,
      'STEP_DEADLINE=$((SECONDS + 60))',
      'stage_router_wheelhouse',
      'echo "status $?"',
    ].join('\n'),
    env,
  );
  return { ...result, wheelhouse: box.path(routerWheelhouse(version)) };
}

describe('the router wheelhouse', () => {
  test('settings.env names the pinned image, version and the folder the router mounts', () => {
    const settings = renderSettings(config);
    expect(settings).toContain(`ROUTER_IMAGE_REF='${IMAGE_REF}'`);
    expect(settings).toContain(`ROUTER_VERSION='${version}'`);
    expect(settings).toContain(`ROUTER_WHEELHOUSE='/var/lib/lab/models/wheels/vllm-router-${version}'`);
  });

  test('pip downloads binary wheels only, inside the pinned router image, into the wheelhouse', () => {
    const box = makeSandbox();
    const { stdout, wheelhouse } = stage(box);
    expect(stdout).toContain('status 0');
    const calls = box.calls();
    const pull = calls.indexOf(`k3s ctr --namespace k8s.io image pull ${IMAGE_REF}`);
    const run = calls.findIndex((c) => c.includes('lab-router-wheelhouse pip download'));
    expect(pull).toBeGreaterThanOrEqual(0);
    expect(run).toBeGreaterThan(pull);
    expect(calls[run]).toContain(`--mount type=bind,src=${wheelhouse}.part,dst=/wheels,options=rbind:rw`);
    expect(calls[run]).toContain(
      `${IMAGE_REF} lab-router-wheelhouse pip download --no-cache-dir --only-binary=:all: --dest /wheels vllm-router==${version}`,
    );
    // The wheel the router's start script looks for is there, with its dependencies; no scratch left.
    expect(readdirSync(wheelhouse).sort()).toEqual([
      'fastapi-0.118.0-py3-none-any.whl',
      `vllm_router-${version}-cp38-abi3-manylinux_2_28_x86_64.whl`,
    ]);
    expect(existsSync(`${wheelhouse}.part`)).toBe(false);
    expect(routerStartScript(version, ['--policy', 'round_robin'])).toContain(
      `ls /wheels/vllm_router-${version}-*.whl`,
    );
  });

  test('a wheelhouse already staged (a reboot) is kept and nothing is downloaded', () => {
    const box = makeSandbox();
    const wheelhouse = box.path(routerWheelhouse(version));
    mkdirSync(wheelhouse, { recursive: true });
    writeFileSync(join(wheelhouse, `vllm_router-${version}-cp38-abi3-manylinux_2_28_x86_64.whl`), '');
    const { stdout } = stage(box);
    expect(stdout).toContain('status 0');
    expect(stdout).toContain(`router wheelhouse already at ${wheelhouse}`);
    expect(box.calls().some((c) => c.includes('pip download'))).toBe(false);
  });

  test('no matching wheel: logged with the fallback, status 1, and no partial wheelhouse left', () => {
    const box = makeSandbox();
    const { stdout, stderr, wheelhouse } = stage(box, { FAKE_PIP_FAIL: '1' });
    expect(stdout).toContain('status 1');
    expect(stderr).toContain(`No matching distribution found for vllm-router==${version}`);
    expect(stdout).toContain(
      `could not stage the router wheelhouse (pip download --only-binary=:all: vllm-router==${version} failed in ${IMAGE_REF}, see the lines above): the routers install vllm-router from PyPI at each start`,
    );
    expect(existsSync(wheelhouse)).toBe(false);
    expect(existsSync(`${wheelhouse}.part`)).toBe(false);
  });
});
