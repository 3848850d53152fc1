# shellcheck shell=bash
# Step: preflight. Tools, the manifests folder, and every prerequisite resolves, now, before K3s
# and the image pulls: a release URL or chart that does not resolve fails in the first minutes,
# not after half an hour.

preflight() {
  local tool kind id source release chart version namespace repo values placeholders n=0 charts=("$LAB_MANIFESTS_DIR"/[0-9]*.yaml)
  for tool in curl python3 timeout sha256sum; do
    command -v "$tool" >/dev/null || die "'$tool' is not on the PATH (expected on the AMI of $AMI_PARAMETER)"
  done
  [ -f "$LAB_MANIFESTS_DIR/prerequisites.json" ] ||
    die "$LAB_MANIFESTS_DIR/prerequisites.json is missing: the manifests asset is not a synthesized lab folder"
  ((${#charts[@]} > 0)) || die "no chart files (NN-*.yaml) in $LAB_MANIFESTS_DIR"
  log "charts to apply, in order: ${charts[*]##*/}"
  read_prerequisites
  # Emptied: a first boot has nothing to remove (rm would be a process for nothing).
  if [ -e "$WORK_DIR/prerequisites" ] || [ -L "$WORK_DIR/prerequisites" ]; then rm -rf "$WORK_DIR/prerequisites"; fi
  mkdir -p "$WORK_DIR/prerequisites"
  while IFS=$'\t' read -r -u 3 kind id source release chart version namespace repo values placeholders; do
    n=$((n + 1))
    if [ "$kind" = manifest ]; then
      log "downloading prerequisite $id from $source"
      curl -fsSL --retry 5 --max-time 300 -o "$WORK_DIR/prerequisites/$id.yaml" "$source" ||
        die "cannot download prerequisite $id from $source"
    else
      ensure_helm
      # shellcheck disable=SC2046 # repo_flag prints two words or none
      within_budget "$HELM" show chart "$chart" $(repo_flag "$repo") --version "$version" >/dev/null ||
        die "prerequisite $id: Helm chart $chart version $version does not resolve${repo:+ in $repo}"
      if [ "$values" != - ] && [ ! -f "$LAB_MANIFESTS_DIR/$values" ]; then
        die "prerequisite $id: its values file $values is not in $LAB_MANIFESTS_DIR"
      fi
      log "prerequisite $id: values ${values}, placeholders ${placeholders}"
      log "prerequisite $id: Helm chart $chart $version resolves (release $release in $namespace)"
    fi
  done 3<"$WORK_DIR/prerequisites.tsv"
  while IFS=$'\t' read -r -u 3 kind id source namespace chart; do
    [ -f "$LAB_MANIFESTS_DIR/$source.yaml" ] ||
      die "after-apply step $id ($kind $namespace/$chart) follows $source.yaml, which is not in $LAB_MANIFESTS_DIR"
  done 3<"$WORK_DIR/after-apply.tsv"
  log "$n prerequisite(s) resolve"
}

# prerequisites.json -> prerequisites.tsv (kind id url release chart version namespace repo
# valuesFile placeholders, "-" where a field does not apply; placeholders comma-separated) and
# after-apply.tsv (kind id after namespace deployment); the URLs live in one place, lib/prereqs.
read_prerequisites() {
  python3 - "$LAB_MANIFESTS_DIR/prerequisites.json" "$WORK_DIR" <<'PY' ||
import json, sys
doc = json.load(open(sys.argv[1]))
fields = ("kind", "id", "url", "release", "chart", "version", "namespace", "repo", "valuesFile")
with open(sys.argv[2] + "/prerequisites.tsv", "w") as out:
    for p in doc["prerequisites"]:
        if p["kind"] not in ("manifest", "helm"):
            sys.exit("unknown prerequisite kind " + p["kind"] + " (" + p["id"] + ")")
        placeholders = ",".join(p.get("placeholders", {})) or "-"
        print(*(p.get(f, "-") for f in fields), placeholders, sep="\t", file=out)
with open(sys.argv[2] + "/after-apply.tsv", "w") as out:
    for s in doc.get("afterApply", []):
        if s["kind"] != "rollout-restart":
            sys.exit("unknown after-apply kind " + s["kind"] + " (" + s["id"] + ")")
        print(s["kind"], s["id"], s["after"], s["namespace"], s["deployment"], sep="\t", file=out)
PY
    die "cannot use $LAB_MANIFESTS_DIR/prerequisites.json (see the line above)"
}

# Helm, pinned and checked against its published SHA-256; only for Helm prerequisites.
ensure_helm() {
  if [ -x "$HELM" ]; then return 0; fi
  local arch tarball
  arch=$(dpkg --print-architecture)
  tarball="helm-$HELM_VERSION-linux-$arch.tar.gz"
  if ! curl -fsSL --retry 5 --max-time 300 -o "$WORK_DIR/$tarball" "https://get.helm.sh/$tarball" ||
    ! curl -fsSL --retry 5 --max-time 60 -o "$WORK_DIR/$tarball.sha256sum" "https://get.helm.sh/$tarball.sha256sum"; then
    die "cannot download Helm $HELM_VERSION from https://get.helm.sh/$tarball"
  fi
  (cd "$WORK_DIR" && sha256sum -c "$tarball.sha256sum") || die "$tarball does not match its published checksum"
  tar -xzf "$WORK_DIR/$tarball" -C "$WORK_DIR" "linux-$arch/helm"
  install -m 755 "$WORK_DIR/linux-$arch/helm" "$HELM"
  "$HELM" version --short
}

# `--repo <url>` for a chart of a classic Helm repository (Cilium, Istio); nothing for an OCI chart.
repo_flag() {
  if [ "$1" != - ]; then printf -- '--repo %s\n' "$1"; fi
}
