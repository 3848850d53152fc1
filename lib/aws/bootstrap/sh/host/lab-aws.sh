#!/bin/bash
# lab-aws: the S3 and Secrets Manager calls of a lab host, with no AWS CLI (a Canonical Ubuntu cell
# has none). curl signs each request (--aws-sigv4, docs/facts.md §2.5) with the instance role's
# temporary keys, read from the metadata service with an IMDSv2 session token and kept between
# calls in a root-only folder on tmpfs (AWS_KEYS_DIR) until shortly before they expire. The keys
# reach curl through a config file (-K) in a private temporary folder, removed on exit: never on a
# command line, never in a log.
#
#   lab-aws check                                 curl can sign (exit 1 with the version found)
#   lab-aws put <file> s3://<bucket>/<key>        PutObject
#   lab-aws get s3://<bucket>/<key> <file|->      GetObject (exit 4 when there is no such key)
#   lab-aws sync-up <dir> s3://<bucket>/<prefix>/ a PutObject per new or changed file
#   lab-aws sync-down s3://<bucket>/<prefix>/ <dir>   ListObjectsV2, a GetObject per missing file
#   lab-aws secret <secret id> <file>             GetSecretValue's SecretString into <file> (mode 600)
#
# Called by the bootstrap (helpers.sh lab_aws) and by the programs it installs. LAB_SETTINGS names
# the bootstrap's settings.env; LAB_REGION comes from the environment or HOST_ENV_FILE.
set -euo pipefail
# shellcheck source=/dev/null
source "${LAB_SETTINGS:?LAB_SETTINGS must name the bootstrap settings.env}"
if [ -z "${LAB_REGION:-}" ] && [ -f "$HOST_ENV_FILE" ]; then
  # shellcheck source=/dev/null
  source "$HOST_ENV_FILE"
fi
: "${LAB_REGION:?LAB_REGION is not set (the launcher exports it; host.env keeps it)}"
# Where the role's keys are kept between calls (settings.env; none: no cache).
AWS_KEYS_DIR=${AWS_KEYS_DIR:-}

# docs/facts.md §2.5: curl signs the x-amz-* headers it is given (x-amz-security-token,
# x-amz-content-sha256) only from 7.86.0; S3 refuses unsigned x-amz-* headers.
readonly CURL_MINIMUM=7.86.0
# SHA-256 of nothing: the payload hash of a GET.
readonly EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

umask 077

fail() {
  echo "lab-aws: $*" >&2
  exit 1
}

# version_at_least <version> <minimum>: numeric dotted versions ("8.5.0"), compared field by field
# in bash (every lab-aws call checks curl's version; sort -V would be two more processes).
version_at_least() {
  local have want i
  IFS=. read -r -a have <<<"${1%%[!0-9.]*}"
  IFS=. read -r -a want <<<"$2"
  for ((i = 0; i < ${#want[@]}; i++)); do
    if ((10#${have[i]:-0} != 10#${want[i]})); then ((10#${have[i]:-0} > 10#${want[i]})); return; fi
  done
  return 0
}

# Sets use_cli when curl is too old to sign and the image has an AWS CLI (the GPU host's Ubuntu
# 22.04 Deep Learning AMI: curl 7.81.0 and the CLI, docs/facts.md §2.1); fails when it has neither.
check_curl() {
  local line version
  # The redirection outside the command substitution: inside it, bash forks twice.
  { line=$(curl --version --max-time 5); } 2>/dev/null || fail "curl is not on the PATH"
  line=${line%%$'\n'*}
  read -r _ version _ <<<"$line"
  if version_at_least "$version" "$CURL_MINIMUM"; then return 0; fi
  if command -v aws >/dev/null; then
    use_cli=1
    return 0
  fi
  fail "curl $version cannot sign AWS requests with an instance role: --aws-sigv4 signs the x-amz-security-token and x-amz-content-sha256 headers from curl $CURL_MINIMUM on (this host has: $line), and there is no AWS CLI to use instead"
}

# The same commands through the AWS CLI, for a host whose curl cannot sign.
cli() {
  local rc=0 value
  case "$1" in
  check) ;;
  put)
    hold_put_lock "$3"
    # A copy under the file's own name: the CLI guesses the Content-Type from it.
    cp -- "$2" "$private/${2##*/}" || fail "put: cannot read $2"
    aws s3 cp --only-show-errors --region "$LAB_REGION" "$private/${2##*/}" "$3" ;;
  get)
    aws s3 cp --only-show-errors --region "$LAB_REGION" "$2" "$3" 2>"$private/error" || rc=$?
    if ((rc != 0)); then
      cat "$private/error" >&2
      if grep -q '(404)' "$private/error"; then return 4; fi
      return "$rc"
    fi ;;
  sync-up) aws s3 sync "${2%/}/" "${3%/}/" --region "$LAB_REGION" --only-show-errors ;;
  sync-down) aws s3 sync "${2%/}/" "${3%/}/" --region "$LAB_REGION" --only-show-errors ;;
  secret)
    value=$(aws secretsmanager get-secret-value --region "$LAB_REGION" --secret-id "$2" \
      --query SecretString --output text) || fail "GetSecretValue $2 failed (AWS CLI)"
    if [ -z "$value" ] || [ "$value" = None ]; then fail "GetSecretValue $2: the secret has no SecretString"; fi
    printf '%s' "$value" >"$3"
    chmod 600 "$3" ;;
  *) fail "unknown command '${1:-}' (check, put, get, sync-up, sync-down, secret)" ;;
  esac
}

# imds <session token> <path>: one metadata value (IMDSv2).
imds() { curl -sS --fail --max-time 5 -H "X-aws-ec2-metadata-token: $1" "$IMDS/meta-data/$2"; }

# The role's keys between calls (docs/facts.md §2.9). Three metadata reads (a session token, the
# role, its keys) were three curl processes before every signed request; the keys are valid for
# hours, and the metadata service offers new ones at least five minutes before the old ones
# expire. So the keys are kept in AWS_KEYS_DIR/keys (settings.env: /run/lab-aws, tmpfs, made by
# root with mode 700, the file 600 through umask 077) and used until KEYS_MARGIN_SECONDS before
# their Expiration; then, or when a service refuses them as expired or unknown, they are read
# again. Without AWS_KEYS_DIR, or where it cannot be made, every call reads them as before.
readonly KEYS_MARGIN_SECONDS=300
# The keys in $private/credentials: usable until this epoch second (-1: their expiry is unknown,
# so for this call's first tries only, as before the cache), and whether they came from the cache.
keys_until=0
keys_cached=0

# keys_valid <id> <secret> <token>: the values are base64-like; one with a quote, a backslash or a
# blank would need escaping in curl's config, and is refused.
keys_valid() {
  [[ -n "$1" && -n "$2" && -n "$3" && ! "$1$2$3" =~ [\"\\[:space:][:cntrl:]] ]]
}

# epoch_of <variable> <time>: sets the variable to the seconds since the epoch of a UTC time in the
# metadata service's form, 2030-01-01T00:00:00Z (fractions of a second ignored), by bash
# arithmetic (days from the civil date); returns 1 for any other text.
epoch_of() {
  local pattern='^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?Z$'
  local y m d era year_of_era day_of_year
  [[ "$2" =~ $pattern ]] || return 1
  y=$((10#${BASH_REMATCH[1]})) m=$((10#${BASH_REMATCH[2]})) d=$((10#${BASH_REMATCH[3]}))
  if ((m <= 2)); then y=$((y - 1)); fi
  era=$((y / 400))
  year_of_era=$((y - era * 400))
  day_of_year=$(((153 * ((m + 9) % 12) + 2) / 5 + d - 1))
  printf -v "$1" '%d' $((((era * 146097 + year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year - 719468) * 86400) +
    10#${BASH_REMATCH[4]} * 3600 + 10#${BASH_REMATCH[5]} * 60 + 10#${BASH_REMATCH[6]}))
}

# write_config <id> <secret> <token>: the keys as curl config lines (user, and the session token
# header), in the private folder, mode 600.
write_config() {
  printf 'user = "%s:%s"\nheader = "x-amz-security-token: %s"\n' "$1" "$2" "$3" >"$private/credentials"
}

# cached_keys <now>: the cache's keys into curl's config, when the cache folder and file are this
# user's own (not links) and hold well-formed keys usable for KEYS_MARGIN_SECONDS more. A cache
# that is missing, unreadable, cut short or otherwise malformed is ignored (and replaced by the
# next read from the metadata service).
cached_keys() {
  local file="$AWS_KEYS_DIR/keys" until id secret token rest
  [ -n "$AWS_KEYS_DIR" ] && [ -d "$AWS_KEYS_DIR" ] && [ ! -L "$AWS_KEYS_DIR" ] && [ -O "$AWS_KEYS_DIR" ] &&
    [ -f "$file" ] && [ ! -L "$file" ] && [ -O "$file" ] || return 1
  { read -r until id secret token rest <"$file"; } 2>/dev/null || return 1
  [[ "$until" =~ ^[0-9]{1,12}$ && -z "$rest" ]] && keys_valid "$id" "$secret" "$token" || return 1
  ((10#$until - KEYS_MARGIN_SECONDS > $1)) || return 1
  write_config "$id" "$secret" "$token"
  keys_until=$((10#$until - KEYS_MARGIN_SECONDS))
  keys_cached=1
}

# cache_keys <expiry epoch> <id> <secret> <token>: best effort (a cache that cannot be written costs
# three metadata reads per call, nothing else), and no process once the folder exists: the folder
# is made with mode 700, the file (umask 077: 600) written in place by one write of one line. A
# reader that finds it empty reads the metadata service itself; of two writers at once, the first
# line is one writer's whole line (readers read only that). A link or another user's file in its
# place is removed first, never written through.
cache_keys() {
  local file="$AWS_KEYS_DIR/keys"
  [ -n "$AWS_KEYS_DIR" ] || return 0
  # shellcheck disable=SC2174 # the mode is the last folder's: /run exists on a host (umask 077 too)
  if [ ! -d "$AWS_KEYS_DIR" ]; then mkdir -p -m 700 "$AWS_KEYS_DIR" 2>/dev/null || return 0; fi
  [ ! -L "$AWS_KEYS_DIR" ] && [ -O "$AWS_KEYS_DIR" ] || return 0
  if [ -L "$file" ] || { [ -e "$file" ] && [ ! -O "$file" ]; }; then rm -f "$file" 2>/dev/null || return 0; fi
  { printf '%s %s %s %s\n' "$@" >"$file"; } 2>/dev/null || true
}

# The role's current keys from the metadata service into curl's config, and into the cache when
# their Expiration is in the documented form and more than KEYS_MARGIN_SECONDS away.
write_credentials() {
  local session role keys id secret token expiration expires now
  session=$(curl -sS --fail --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' "$IMDS/api/token") ||
    fail "no session token from the metadata service (IMDSv2)"
  role=$(imds "$session" iam/security-credentials/) || fail "no instance role credentials from the metadata service (IMDSv2)"
  role=${role%%$'\n'*}
  keys=$(imds "$session" "iam/security-credentials/$role") || fail "the metadata service gave no keys for role $role"
  json_field id AccessKeyId "$keys"
  json_field secret SecretAccessKey "$keys"
  json_field token Token "$keys"
  keys_valid "$id" "$secret" "$token" || fail "the metadata service's keys for role $role are not in the expected form"
  write_config "$id" "$secret" "$token"
  keys_cached=0 keys_until=-1
  json_field expiration Expiration "$keys"
  printf -v now '%(%s)T' -1
  if epoch_of expires "$expiration" && ((expires - KEYS_MARGIN_SECONDS > now)); then
    keys_until=$((expires - KEYS_MARGIN_SECONDS))
    cache_keys "$expires" "$id" "$secret" "$token"
  fi
}

# role_keys <attempt> [fresh]: curl's config holds keys for the next try: this call's own while
# they are usable, else the cache's, else (and always with "fresh") the metadata service's.
# Keys whose expiry is unknown serve a call's first tries only, and are read again for a retry.
role_keys() {
  local now
  if [ -z "${2:-}" ]; then
    printf -v now '%(%s)T' -1
    if [ -s "$private/credentials" ] && { ((keys_until > now)) || ((keys_until == -1 && $1 == 1)); }; then return 0; fi
    if cached_keys "$now"; then return 0; fi
  fi
  write_credentials
}

# keys_refused <what AWS said>: whether the service refused the keys themselves (expired, or not
# known to it): S3's ExpiredToken, TokenRefreshRequired, InvalidToken, InvalidAccessKeyId, the
# JSON protocol's ExpiredTokenException, UnrecognizedClientException, InvalidClientTokenId
# (docs/facts.md §2.9). Cached keys so refused are read again and the request tried once more.
keys_refused() {
  case "${1%%:*}" in
  ExpiredToken | TokenRefreshRequired | InvalidToken | InvalidAccessKeyId | ExpiredTokenException | UnrecognizedClientException | InvalidClientTokenId) return 0 ;;
  esac
  return 1
}

# json_field <variable> <name> <json>: sets the variable to a string field of a flat JSON object
# (the metadata service's keys), or to nothing; matched by bash itself, no process.
json_field() {
  local pattern="\"$2\"[[:space:]]*:[[:space:]]*\"([^\"]*)\""
  printf -v "$1" '%s' ''
  if [[ "$3" =~ $pattern ]]; then printf -v "$1" '%s' "${BASH_REMATCH[1]}"; fi
}

# Flat JSON objects read by bash itself (a python3 start each cost more than the rest of a call):
# an object whose members are "name": value, each value a string without escapes or control
# characters, a number, or an array of such strings; what GetSecretValue and the JSON protocol's
# errors answer. Inside one, every '"' opens or closes a string, so a name followed by ':' is a
# member's. Anything else goes to python3's json module.
readonly JSON_TEXT='"[^"\[:cntrl:]]*"'
readonly JSON_NUMBER='-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?'

# flat_json <text> [strings]: whether the text is such an object; with "strings", one whose values
# are all strings.
flat_json() {
  local s='[[:space:]]*' value member object
  value=$JSON_TEXT
  if [ "${2:-}" != strings ]; then value="($JSON_TEXT|$JSON_NUMBER|\[$s($JSON_TEXT($s,$s$JSON_TEXT)*)?$s\])"; fi
  member="$JSON_TEXT$s:$s$value"
  object="^$s\{$s($member($s,$s$member)*)?$s\}$s$"
  [[ $1 =~ $object ]]
}

# json_member <variable> <name> <text>: in an object flat_json accepted, sets the variable to the
# string value of the member <name>. Returns 1 when there is none, 2 when it is named twice
# (JSON parsers keep the last) or its value is not a string.
json_member() {
  local twice="\"$2\"[[:space:]]*:.*\"$2\"[[:space:]]*:" named="\"$2\"[[:space:]]*:" string="\"$2\"[[:space:]]*:[[:space:]]*($JSON_TEXT)"
  [[ $3 =~ $named ]] || return 1
  if [[ $3 =~ $twice ]] || ! [[ $3 =~ $string ]]; then return 2; fi
  string=${BASH_REMATCH[1]}
  printf -v "$1" '%s' "${string:1:${#string}-2}"
}

# uri_encode <variable> <text> [characters to keep]: sets the variable to AWS's URI encoding of
# the text: unreserved characters stay, every other byte is %XX; the third argument adds
# characters to keep ('/' in an S3 key's path). Into a variable, not printed: a command
# substitution would be a process per request.
uri_encode() {
  local LC_ALL=C _text=$2 _keep=${3:-} _out='' _c _i
  for ((_i = 0; _i < ${#_text}; _i++)); do
    _c=${_text:_i:1}
    if [[ "$_c" == [A-Za-z0-9._~-] ]] || [[ -n "$_keep" && "$_keep" == *"$_c"* ]]; then
      _out+=$_c
    else
      printf -v _c '%%%02X' "'$_c"
      _out+=$_c
    fi
  done
  printf -v "$1" '%s' "$_out"
}

# s3_url <variable> <bucket> <key> [query]: sets the variable to the object's URL, virtual-hosted
# style (docs/facts.md §2.5).
s3_url() {
  local _path
  uri_encode _path "$3" /
  printf -v "$1" 'https://%s.s3.%s.amazonaws.com/%s%s' "$2" "$LAB_REGION" "$_path" "${4:+?$4}"
}

# What AWS said in an error body: S3's XML <Code>/<Message>, or the JSON protocol's __type/message.
# A body that starts with "<" is no JSON: its <Code> and <Message> are read by bash itself, each
# the first on one line (S3's error XML escapes "<" inside them); python3 parses the rest.
error_text() {
  local text lead said='' found=() code_pattern=$'<Code>([^<\n]*)</Code>' message_pattern=$'<Message>([^<\n]*)</Message>'
  { IFS= read -r -d '' text || true; } 2>/dev/null <"$1"
  lead=${text%%[![:space:]]*}
  if [ "${text:${#lead}:1}" = '<' ]; then
    if [[ "$text" =~ $code_pattern ]]; then found+=("${BASH_REMATCH[1]}"); fi
    if [[ "$text" =~ $message_pattern ]]; then found+=("${BASH_REMATCH[1]}"); fi
    if ((${#found[@]} > 0)); then said=${found[0]}${found[1]+: ${found[1]}}; fi
    if [ -z "$said" ]; then
      said=${text:0:200}
      said=${said#"${said%%[![:space:]]*}"}
      said=${said%"${said##*[![:space:]]}"}
    fi
    printf '%s\n' "$said"
    return 0
  fi
  # The JSON protocol's error, {"__type": ..., "message": ...}, as the python3 below prints it.
  if flat_json "$text" strings; then
    local type='' message='' type_rc=0 message_rc=0 other_rc=0
    json_member type __type "$text" || type_rc=$?
    json_member message message "$text" || message_rc=$?
    if ((message_rc == 1)); then json_member message Message "$text" || other_rc=$?; fi
    if ((type_rc < 2 && message_rc < 2 && other_rc < 2)); then
      said="${type##*#}: $message"
      said=${said#"${said%%[!: ]*}"}
      printf '%s\n' "${said%"${said##*[!: ]}"}"
      return 0
    fi
  fi
  python3 -c 'import json, re, sys
text = open(sys.argv[1], errors="replace").read()
try:
    body = json.loads(text)
    print((body.get("__type", "").split("#")[-1] + ": " + str(body.get("message", body.get("Message", "")))).strip(": "))
except ValueError:
    code = re.search(r"<Code>(.*?)</Code>", text)
    message = re.search(r"<Message>(.*?)</Message>", text)
    print(": ".join(m.group(1) for m in (code, message) if m) or text[:200].strip())' "$1" 2>/dev/null || true
}

# retryable_400 <what AWS said>: whether a 400 says "try again": JSON-protocol services (Secrets
# Manager) answer throttling with HTTP 400 and the error's __type (docs/facts.md §2.5).
retryable_400() {
  case "${1%%:*}" in
  ThrottlingException | Throttling | TooManyRequestsException | RequestLimitExceeded | InternalServiceError) return 0 ;;
  esac
  return 1
}

# request <what> <service> <body file> <curl arguments...>: one signed request, tried AWS_ATTEMPTS
# times while the answer is a 5xx, a 429, a throttling 400 or no answer at all, further apart each
# time. Returns 0 on a 2xx, 4 on a 404; any other answer fails at once, naming what was asked and
# what AWS said.
request() {
  local what=$1 service=$2 body=$3 attempt status answer said fresh=''
  shift 3
  for ((attempt = 1; ; attempt++)); do
    role_keys "$attempt" "$fresh"
    fresh=''
    # Emptied, not removed (rm is a process): a failed attempt leaves nothing of an earlier answer.
    : >"$body"
    status=$(curl -q -sS --max-time "$AWS_MAX_SECONDS" -K "$private/credentials" \
      --aws-sigv4 "aws:amz:$LAB_REGION:$service" -o "$body" -w '%{http_code}' "$@") || status=${status:-000}
    case "$status" in
    2??) return 0 ;;
    404) return 4 ;;
    esac
    answer="HTTP $status" said=''
    # Read once: for a JSON error that is a python3 start.
    if [ -s "$body" ]; then
      said=$(error_text "$body")
      answer+=" $said"
    fi
    # Cached keys refused as expired or unknown: read again, and tried once more (not an attempt).
    if ((keys_cached)) && [[ "$status" == 40[03] ]] && keys_refused "$said"; then
      echo "lab-aws: $what: $answer, with the cached keys: trying once more with keys read again" >&2
      fresh=1 attempt=$((attempt - 1))
      continue
    fi
    case "$status" in
    5?? | 429 | 000) ;;
    400) retryable_400 "$said" || fail "$what: $answer" ;;
    *) fail "$what: $answer" ;;
    esac
    if ((attempt >= AWS_ATTEMPTS)); then fail "$what: $answer (after $attempt attempts)"; fi
    echo "lab-aws: $what: $answer, trying again ($attempt of $AWS_ATTEMPTS)" >&2
    sleep $((attempt * AWS_RETRY_SECONDS))
  done
}

# split_s3_uri s3://bucket/key: sets bucket and key.
split_s3_uri() {
  [[ "$1" == s3://?*/* ]] || fail "not an s3://bucket/key address: $1"
  local path=${1#s3://}
  bucket=${path%%/*}
  key=${path#*/}
}

# hold_put_lock s3://<bucket>/<key>: one upload to a key at a time on this host, held until this
# process (or sync-up's subshell for the file) ends. Each upload copies its file once it holds the
# lock, so the later copy lands later: S3 keeps the last PutObject to arrive, and the log timer's
# upload of an older, shorter log, started before the final upload (the deadline's, the failed
# bootstrap's) and answered after it, replaced the final log. Keyed by the object, not the file:
# the runner renames a new status.json into place, a new file for the same key. flock(1) from
# util-linux, on every Ubuntu image (docs/facts.md §2.8); callers bound the wait (timeout).
hold_put_lock() {
  local name=${1#s3://} lock
  name=${name//\//%}
  if ((${#name} > 200)); then
    printf '%s' "$1" >"$private/lock-name"
    name=$(sha256sum "$private/lock-name")
    name=${name%% *}
  fi
  [ -d "$S3_SYNC_STATE_DIR/put-locks" ] || mkdir -p "$S3_SYNC_STATE_DIR/put-locks"
  exec {lock}>>"$S3_SYNC_STATE_DIR/put-locks/$name" || fail "put: cannot open the lock for $1"
  if ! flock -n "$lock"; then
    echo "lab-aws: put $1: waiting for the upload in flight to the same key, so that this later copy lands last" >&2
    flock "$lock" || fail "put: cannot lock $1"
  fi
}

# The object's real SHA-256 as its payload hash, and the body from memory: curl then signs the
# same hash whatever its version (docs/facts.md §2.5). Both from a copy in the private folder: the
# file may grow between the hash and curl's read (the bootstrap's log on its 2-minute timer, a
# running study's logs), and S3 refuses a body that is not what was hashed
# (XAmzContentSHA256Mismatch, not retried): the upload failed.
put() {
  local file=$1 bucket key hash url body="$private/upload"
  split_s3_uri "$2"
  [ -f "$file" ] || fail "put: no file $file"
  hold_put_lock "$2"
  cp -- "$file" "$body" || fail "put: cannot read $file"
  hash=$(sha256sum "$body")
  hash=${hash%% *}
  s3_url url "$bucket" "$key"
  request "PutObject $2" s3 "$private/answer" -X PUT -H "x-amz-content-sha256: $hash" \
    -H 'Content-Type: application/octet-stream' --data-binary "@$body" "$url"
}

get() {
  local bucket key rc=0 url
  split_s3_uri "$1"
  s3_url url "$bucket" "$key"
  request "GetObject $1" s3 "$private/object" -H "x-amz-content-sha256: $EMPTY_SHA256" "$url" || rc=$?
  if ((rc == 4)); then
    echo "lab-aws: GetObject $1: no such key" >&2
    return 4
  fi
  if [ "$2" = - ]; then cat "$private/object"; else mv "$private/object" "$2"; fi
}

# sync-up: a PutObject per file whose size or modification time differs from what the last
# successful upload of it recorded (the periodic sync stays cheap). Every file is tried; the
# record keeps what reached S3.
sync_up() {
  local dir=${1%/} prefix=${2%/} state size mtime path failed=0 uploaded=0
  local -A sent=()
  [ -d "$dir" ] || fail "sync-up: no folder $dir"
  [ -d "$S3_SYNC_STATE_DIR" ] || mkdir -p "$S3_SYNC_STATE_DIR"
  # Named by the hash of "<dir> <prefix>", hashed from a file: one process, not a pipeline's three.
  printf '%s %s' "$dir" "$prefix" >"$private/state-name"
  state=$(sha256sum "$private/state-name")
  state="$S3_SYNC_STATE_DIR/${state:0:16}"
  if [ -f "$state" ]; then
    while IFS=' ' read -r size mtime path; do sent["$path"]="$size $mtime"; done <"$state"
  fi
  while IFS=' ' read -r -d '' size mtime path; do
    if [ "${sent["$path"]:-}" = "$size $mtime" ]; then continue; fi
    if (put "$dir/$path" "$prefix/$path"); then
      sent["$path"]="$size $mtime"
      uploaded=$((uploaded + 1))
    elif [ -e "$dir/$path" ]; then
      failed=$((failed + 1))
    fi
    # A file gone since the listing is no failure: the runner writes through a temporary file
    # renamed into place (status.json every few seconds), and its final name is listed next time.
  done < <(find "$dir" -type f -printf '%s %T@ %P\0' | sort -z -k 3)
  # Written under a name of this process's own: two syncs can run at once (the 5-minute timer and
  # the deadline, terminateWhenDone's watcher or lab results), and with one shared name the
  # second mv found the file gone and failed its whole sync.
  for path in "${!sent[@]}"; do printf '%s %s\n' "${sent["$path"]}" "$path"; done >"$state.new.$$"
  mv "$state.new.$$" "$state"
  if ((failed > 0)); then fail "sync-up $dir -> $prefix/: $failed file(s) not uploaded ($uploaded uploaded)"; fi
}

# sync-down: ListObjectsV2 pages (the query already in canonical order, so every curl signs it as
# S3 reads it), then a GetObject per key with no local file of the same size.
sync_down() {
  local bucket key dir=${2%/} prefix token='' query listing name size url encoded_token encoded_prefix local_file
  split_s3_uri "${1%/}/"
  prefix=$key
  mkdir -p "$dir"
  while :; do
    uri_encode encoded_token "$token"
    uri_encode encoded_prefix "$prefix"
    query="${token:+continuation-token=$encoded_token&}list-type=2&prefix=$encoded_prefix"
    s3_url url "$bucket" '' "$query"
    request "ListObjectsV2 s3://$bucket/$prefix" s3 "$private/listing" \
      -H "x-amz-content-sha256: $EMPTY_SHA256" "$url" ||
      fail "ListObjectsV2 s3://$bucket/$prefix: no such bucket"
    # An empty listing (a first boot's restore: nothing stored yet) needs no parser: S3's answer
    # then holds no <Contents> and says KeyCount 0, IsTruncated false (docs/facts.md §2.5).
    { IFS= read -r -d '' listing || true; } <"$private/listing"
    if [[ "$listing" == *'<ListBucketResult'*'<KeyCount>0</KeyCount>'*'</ListBucketResult>'* &&
      "$listing" == *'<IsTruncated>false</IsTruncated>'* && "$listing" != *'<Contents>'* ]]; then
      break
    fi
    listing=$(python3 -c 'import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
for item in root.iter(ns + "Contents"):
    print(item.findtext(ns + "Size"), item.findtext(ns + "Key"))
print("next", root.findtext(ns + "NextContinuationToken") or "")' "$private/listing") ||
      fail "ListObjectsV2 s3://$bucket/$prefix: an answer that is not a listing"
    token=''
    while read -r size name; do
      if [ "$size" = next ]; then
        token=$name
        continue
      fi
      key=${name#"$prefix"}
      if [ -z "$key" ] || [[ "$key" == */ ]]; then continue; fi
      if [ -f "$dir/$key" ] && [ "$(stat -c %s "$dir/$key")" = "$size" ]; then continue; fi
      local_file="$dir/$key"
      mkdir -p "${local_file%/*}"
      get "s3://$bucket/$name" "$local_file"
    done <<<"$listing"
    if [ -z "$token" ]; then break; fi
  done
}

# GetSecretValue (the JSON 1.1 protocol, docs/facts.md §2.5): the answer holds the secret, so it
# stays in the private folder and only SecretString reaches <file>, mode 600.
secret() {
  local id=$1 file=$2
  [[ "$id" =~ ^[A-Za-z0-9:/_+=.@-]+$ ]] || fail "secret: not a secret name or ARN: $id"
  request "GetSecretValue $id" secretsmanager "$private/secret" \
    -H 'X-Amz-Target: secretsmanager.GetSecretValue' -H 'Content-Type: application/x-amz-json-1.1' \
    --data-binary "{\"SecretId\":\"$id\"}" "https://secretsmanager.$LAB_REGION.amazonaws.com/" ||
    fail "GetSecretValue $id: not found"
  local answer value rc=0
  { IFS= read -r -d '' answer || true; } <"$private/secret"
  if flat_json "$answer"; then json_member value SecretString "$answer" || rc=$?; else rc=2; fi
  if ((rc == 0)); then
    [ -n "$value" ] || fail "GetSecretValue $id: the secret has no SecretString"
    printf '%s' "$value" >"$file"
    chmod 600 "$file"
    return 0
  fi
  python3 -c 'import json, sys
value = json.load(open(sys.argv[1])).get("SecretString") or ""
if not value:
    sys.exit("lab-aws: GetSecretValue " + sys.argv[3] + ": the secret has no SecretString")
with open(sys.argv[2], "w") as out:
    out.write(value)' "$private/secret" "$file" "$id"
  chmod 600 "$file"
}

use_cli=0
check_curl
# A check needs no private folder (two processes fewer on every boot).
if [ "${1:-}" = check ]; then exit 0; fi
private=$(mktemp -d "${TMPDIR:-/tmp}/lab-aws.XXXXXX")
trap 'rm -rf "$private"' EXIT
if ((use_cli)); then
  cli "$@"
  exit
fi
case "${1:-}" in
check) ;;
put) put "$2" "$3" ;;
get) get "$2" "$3" ;;
sync-up) sync_up "$2" "$3" ;;
sync-down) sync_down "$2" "$3" ;;
secret) secret "$2" "$3" ;;
*) fail "unknown command '${1:-}' (check, put, get, sync-up, sync-down, secret)" ;;
esac
