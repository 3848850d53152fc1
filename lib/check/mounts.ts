import { list, record, text } from './manifest.ts';
import type { ContainerRef } from './testbed.ts';

/** A file inside a container that comes from a ConfigMap key. */
export interface MountedFile {
  readonly configMap: string;
  /** Undefined when the volume lists `items` and none of them is this file. */
  readonly key: string | undefined;
  /** The volume that mounts it: `spec.template.spec.volumes[1]`. */
  readonly volumeField: string;
}

/**
 * Which ConfigMap key a file path inside the container comes from, following volumeMounts
 * (with or without subPath) to configMap or projected volumes (with or without items).
 */
export function mountedConfigMapFile(ref: ContainerRef, file: string): MountedFile | undefined {
  const volumes = list(ref.pod.spec.volumes).map(record);
  for (const mount of list(ref.container.volumeMounts).map(record)) {
    const mountPath = text(mount.mountPath)?.replace(/\/+$/, '');
    const relative = mountPath === undefined ? undefined : pathInVolume(file, mountPath, text(mount.subPath));
    if (relative === undefined) continue;
    const index = volumes.findIndex((volume) => volume.name === mount.name);
    if (index < 0) continue;
    const volume = volumes[index];
    const sources = [
      record(volume.configMap),
      ...list(record(volume.projected).sources).map((s) => record(record(s).configMap)),
    ];
    for (const source of sources) {
      const configMap = text(source.name);
      if (!configMap) continue;
      const items = source.items === undefined ? undefined : list(source.items).map(record);
      const key = items ? text(items.find((item) => item.path === relative)?.key) : relative;
      return { configMap, key, volumeField: `${ref.pod.path}.volumes[${index}]` };
    }
  }
  return undefined;
}

function pathInVolume(file: string, mountPath: string, subPath: string | undefined): string | undefined {
  if (file === mountPath) return subPath;
  if (!file.startsWith(`${mountPath}/`)) return undefined;
  const rest = file.slice(mountPath.length + 1);
  return subPath ? `${subPath}/${rest}` : rest;
}
