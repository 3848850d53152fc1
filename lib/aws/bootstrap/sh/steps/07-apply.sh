# shellcheck shell=bash
# Steps: the prerequisites of prerequisites.json (third-party manifests and Helm charts), then the
# lab's charts (NN-*.yaml) in file-name order, never jobs/ (a Job starts load on creation).

apply_prerequisites() {
  local kind id source release chart version namespace repo values placeholders values_args
  while IFS=$'\t' read -r -u 3 kind id source release chart version namespace repo values placeholders; do
    if [ "$kind" = manifest ]; then
      log "applying prerequisite $id ($source)"
      # Server-side: CRD bundles exceed the annotation size limit of client-side apply.
      kubectl apply --server-side --field-manager=lab-bootstrap -f "$WORK_DIR/prerequisites/$id.yaml"
      wait_for_crds
      wait_for_deployments_in "$WORK_DIR/prerequisites/$id.yaml"
    else
      log "installing prerequisite $id: Helm chart $chart $version as $release in $namespace"
      values_args=()
      if [ "$values" != - ]; then
        fill_placeholders "$id" "$LAB_MANIFESTS_DIR/$values" "$placeholders" "$WORK_DIR/prerequisites/$id-values.yaml"
        values_args=(--values "$WORK_DIR/prerequisites/$id-values.yaml")
      fi
      # shellcheck disable=SC2046 # repo_flag prints two words or none
      "$HELM" upgrade --install "$release" "$chart" $(repo_flag "$repo") --version "$version" --namespace "$namespace" \
        --create-namespace "${values_args[@]}" --wait --timeout "$((BUDGET_LEFT))s" || die "Helm install of $id ($chart $version) failed"
      wait_for_crds
    fi
  done 3<"$WORK_DIR/prerequisites.tsv"
}

# fill_placeholders <id> <values file> <placeholders, comma-separated or -> <output>: the values
# with each placeholder replaced by what only the host knows. Known: NODE_IP_PLACEHOLDER (the
# node's private IPv4 from IMDSv2, lib/network/cilium-values.ts).
fill_placeholders() {
  local id=$1 source=$2 placeholders=$3 out=$4 name value text names=()
  text=$(<"$source")
  if [ "$placeholders" != - ]; then
    IFS=, read -r -a names <<<"$placeholders"
    for name in "${names[@]}"; do
      case "$name" in
      "$NODE_IP_PLACEHOLDER") value=$(node_private_ip) || die "prerequisite $id: the instance metadata service did not give the node's private IPv4 for $name" ;;
      *) die "prerequisite $id: no value for placeholder $name in $source (the bootstrap knows only $NODE_IP_PLACEHOLDER)" ;;
      esac
      text=${text//"$name"/"$value"}
      log "prerequisite $id: $name = $value"
    done
  fi
  printf '%s\n' "$text" >"$out"
}

# The node's private IPv4 (IMDSv2: a session token first).
node_private_ip() {
  local token
  token=$(curl -fsS --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' "$IMDS/api/token") || return 1
  curl -fsS --max-time 5 -H "X-aws-ec2-metadata-token: $token" "$IMDS/meta-data/local-ipv4"
}

wait_for_crds() {
  wait_until 300 crds_established || die "CustomResourceDefinitions not Established in time"
}

crds_established() { kubectl wait --for=condition=Established crd --all --timeout=30s >/dev/null 2>&1; }

# A controller a later step relies on (Envoy Gateway before the AI Gateway charts) must be up.
wait_for_deployments_in() {
  local namespace name
  kubectl get -f "$1" -o json | python3 -c 'import json, sys
doc = json.load(sys.stdin)
for o in doc.get("items", [doc]):
    if o["kind"] == "Deployment":
        print(o["metadata"]["namespace"], o["metadata"]["name"])' >"$WORK_DIR/deployments.txt"
  while read -r -u 3 namespace name; do
    kubectl -n "$namespace" rollout status "deployment/$name" --timeout="$((BUDGET_LEFT))s" ||
      die "Deployment $namespace/$name of $1 not available within the step's budget"
  done 3<"$WORK_DIR/deployments.txt"
}

apply_charts() {
  local file name
  restore_studies
  # Only the top-level NN-*.yaml files: jobs/ holds the study's Jobs, which start load on creation.
  for file in "$LAB_MANIFESTS_DIR"/[0-9]*.yaml; do
    log "applying ${file##*/}"
    kubectl apply --server-side --field-manager=lab-bootstrap -f "$file"
    name=${file##*/}
    run_after_apply "${name%.yaml}"
  done
}

# A relaunched host resumes the study it was running: the studies the old host synced to S3 come
# back before the runner starts, and the runner resumes the latest unfinished one of its
# configuration (lib/runner/study-id.ts). Without --delete, and never fatal: a first boot has
# nothing to restore, and a fresh study is still a study.
restore_studies() {
  local source="s3://$LAB_RESULTS_BUCKET/$LAB_STACK_NAME/${RESULTS_SUBDIR}$STUDIES_DIR/"
  make_dir "$RESULTS_DIR/$STUDIES_DIR"
  if lab_aws --within "$((BUDGET_LEFT))" sync-down "$source" "$RESULTS_DIR/$STUDIES_DIR/"; then
    count_matches "$RESULTS_DIR/$STUDIES_DIR" study.json
    log "restored $MATCHES earlier study record(s) from $source"
  else
    log "could not restore earlier studies from $source: the runner starts from what this host has"
  fi
}

# The afterApply steps of prerequisites.json that follow this file (a restart of a controller
# that must run on what the file wrote before the lab goes on).
run_after_apply() {
  local kind id after namespace deployment
  while IFS=$'\t' read -r -u 3 kind id after namespace deployment; do
    if [ "$after" = "$1" ]; then
      log "after $1: $id ($kind deployment/$deployment in $namespace)"
      kubectl -n "$namespace" rollout restart "deployment/$deployment"
      kubectl -n "$namespace" rollout status "deployment/$deployment" --timeout="$((BUDGET_LEFT))s" ||
        die "$id: deployment/$deployment in $namespace did not roll out within the step's budget"
    fi
  done 3<"$WORK_DIR/after-apply.tsv"
}
