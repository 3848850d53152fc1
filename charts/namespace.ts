import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';

export interface LabNamespaceProps extends ChartProps {
  /** Namespace every lab object lives in. */
  readonly name: string;
}

/** The lab's namespace; applied first. */
export class LabNamespace extends Chart {
  constructor(scope: Construct, id: string, props: LabNamespaceProps) {
    super(scope, id, props);
    new k8s.KubeNamespace(this, 'namespace', { metadata: { name: props.name } });
  }
}
