import type { NetworkRun, Precondition } from '../../network/study/model.ts';
import type { ClientSteps } from './client-steps.ts';
import type { ConntrackSteps } from './conntrack-steps.ts';
import type { KindOutcome } from './runner-context.ts';
import type { ServiceScaleSteps } from './scale-steps.ts';

/** Each experiment's steps, by the kind of run and of precondition (run-network-study.ts calls them). */
export interface KindSteps {
  readonly clients: ClientSteps;
  readonly scale: ServiceScaleSteps;
  readonly conntrack: ConntrackSteps;
}

/** Runs a run's load: its client, the mTLS matrix, an E9 step or an E10 step. */
export function executeKind(steps: KindSteps, run: NetworkRun): Promise<KindOutcome> {
  const { spec } = run;
  switch (spec.kind) {
    case 'fortio':
    case 'download':
    case 'sse':
      return steps.clients.clientRun(run, spec.clientNamespace, spec.url);
    case 'mtls':
      return steps.clients.mtlsRun(run, spec);
    case 'service-scale':
      return steps.scale.scaleRun(run, spec);
    case 'conntrack':
      return steps.conntrack.conntrackRun(run, spec);
  }
}

/** Establishes or waits for one precondition; the problem when it cannot be met. */
export function establish(steps: KindSteps, run: NetworkRun, p: Precondition): Promise<string | undefined> {
  switch (p.kind) {
    case 'namespace-labelled':
      return steps.clients.namespaceLabelled(p.namespace);
    case 'pods-restarted-after-label':
      return steps.clients.podsRestarted(run.id, p.namespace);
    case 'services-ready':
      return steps.scale.servicesReady(run, p.count);
    case 'conntrack-baseline-below':
      return steps.conntrack.conntrackBaseline(run, p.max);
  }
}
