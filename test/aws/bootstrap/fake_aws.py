"""The S3 and Secrets Manager endpoints as the sandbox's fake curl sees them (test/aws/bootstrap/sandbox.ts).

Called for a signed request that asks for its status (-w '%{http_code}'), as lab-aws.sh makes them:
  fake_aws.py <method> <url> <output file or ''> <data or @file or ''> <headers joined by ';'> <--aws-sigv4 value>
with curl's config (the role's keys) on stdin. It answers as the services do: objects kept in
$SANDBOX/s3/<bucket>/<key> across calls, the payload hash checked against the body, ListObjectsV2 in
pages, GetSecretValue's JSON; unsigned requests are refused. Each request is recorded in
$SANDBOX/aws-requests.log. FAKE_AWS_ANSWERS ("503,000,200"): statuses forced on the next requests in
order (000: no connection; 400T: throttled; 400E: the keys expired); FAKE_S3_PUT_DENIED, FAKE_S3_LIST_DENIED, FAKE_SECRET_DENIED: 403/400
refusals; FAKE_S3_PAGE: keys per listing page.
"""

import os
import sys

# Imported where used, not here: a python3 start per request, and json (with re and enum),
# hashlib (OpenSSL) and urllib.parse were most of its CPU (about 0.14 s of CPU a start with them,
# 0.07 s without, measured on the test VM); the URL is cut by hand below.

KEYS = 'user = "ASIAFAKEKEYID:fake/secret+key-never-logged"'
TOKEN = "x-amz-security-token: fake-session-token-never-logged"
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"

method, url, out, data, header_text, sigv4 = sys.argv[1:7]
config = sys.stdin.read()
sandbox = os.environ["SANDBOX"]
headers = {}
for line in header_text.split(";"):
    if ":" in line:
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()


def dumps(value):
    import json

    return json.dumps(value)


def unquote(text):
    """urllib.parse.unquote: %XX escapes decoded as UTF-8 bytes (invalid ones replaced)."""
    if "%" not in text:
        return text
    raw, out, i = text.encode(), bytearray(), 0
    while i < len(raw):
        pair = raw[i + 1 : i + 3]
        if raw[i] == 0x25 and len(pair) == 2 and all(c in b"0123456789abcdefABCDEF" for c in pair):
            out.append(int(pair, 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", "replace")


def parse_qsl(query):
    """urllib.parse.parse_qsl as called before: '&'-separated pairs, blank values dropped."""
    pairs = []
    for item in query.split("&"):
        name, equals, value = item.partition("=")
        if item and equals and value:
            pairs.append((unquote(name.replace("+", " ")), unquote(value.replace("+", " "))))
    return pairs


# urllib.parse.urlsplit's parts that are read: the host (lower case), the path and the query.
rest = url.split("://", 1)[-1].split("#", 1)[0]
netloc, slash, path_and_query = rest.partition("/")
url_path, _, url_query = ("/" + path_and_query if slash else "").partition("?")
if "?" in netloc:
    netloc, _, url_query = netloc.partition("?")
host = netloc.rsplit("@", 1)[-1].split(":", 1)[0].lower()


def record(text):
    with open(os.path.join(sandbox, "aws-requests.log"), "a") as log:
        log.write(text + "\n")


def answer(status, body=b""):
    if isinstance(body, str):
        body = body.encode()
    if out:
        with open(out, "wb") as file:
            file.write(body)
    else:
        sys.stdout.buffer.write(body)
    sys.stdout.write(str(status))
    sys.exit(0)


def s3_error(status, code, message):
    answer(status, f"<Error><Code>{code}</Code><Message>{message}</Message></Error>")


def forced():
    """The next status of FAKE_AWS_ANSWERS, if any is left."""
    plan = [s for s in os.environ.get("FAKE_AWS_ANSWERS", "").split(",") if s]
    counter = os.path.join(sandbox, "aws-answers-used")
    used = int(open(counter).read()) if os.path.exists(counter) else 0
    if used >= len(plan):
        return None
    with open(counter, "w") as file:
        file.write(str(used + 1))
    return plan[used]


service = "secretsmanager" if host.startswith("secretsmanager.") else "s3"
region = host.split(".")[-3]
signed = sigv4 == f"aws:amz:{region}:{service}" and KEYS in config and TOKEN in config

if service == "s3":
    bucket = host.split(".s3.")[0]
    key = unquote(url_path[1:])
    query = dict(parse_qsl(url_query))
    what = f"LIST {bucket}/{query.get('prefix', '')}" if "list-type" in query else f"{method} {bucket}/{key}"
else:
    what = f"{method} secretsmanager {headers.get('x-amz-target', '')}"
record(what)

status = forced()
if status == "000":
    sys.stdout.write("000")
    sys.stderr.write("curl: (7) Failed to connect\n")
    sys.exit(7)
if status == "400T":
    # Throttled, as a JSON-protocol service says it: HTTP 400 with the error's __type.
    answer(400, dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}))
if status == "400E":
    # The keys expired (or were revoked) before the Expiration the signer relied on: S3 says
    # ExpiredToken (HTTP 400), the JSON protocol ExpiredTokenException (HTTP 403).
    if service == "s3":
        s3_error(400, "ExpiredToken", "The provided token has expired.")
    answer(403, dumps({"__type": "ExpiredTokenException", "message": "The security token included in the request is expired"}))
if status and status != "200":
    if service == "s3":
        s3_error(int(status), "InternalError" if status.startswith("5") else "SlowDown", "We encountered an internal error. Please try again.")
    answer(int(status), dumps({"__type": "InternalServiceError", "message": "try again"}))

if not signed:
    if service == "s3":
        s3_error(403, "AccessDenied", "unsigned or signed with other keys")
    answer(400, dumps({"__type": "UnrecognizedClientException", "message": "The security token included in the request is invalid."}))

if service == "secretsmanager":
    if headers.get("x-amz-target") != "secretsmanager.GetSecretValue" or headers.get("content-type") != "application/x-amz-json-1.1":
        answer(400, dumps({"__type": "UnknownOperationException"}))
    import json

    secret_id = json.loads(data)["SecretId"]
    if os.environ.get("FAKE_SECRET_DENIED"):
        answer(400, dumps({"__type": "AccessDeniedException", "Message": f"User is not authorized to perform: secretsmanager:GetSecretValue on resource: {secret_id}"}))
    token = os.environ.get("FAKE_AGENT_TOKEN", "fake-agent-token")
    answer(200, dumps({"ARN": secret_id, "Name": "ClusterAgentToken", "SecretString": token, "VersionStages": ["AWSCURRENT"]}))

store = os.path.join(sandbox, "s3", bucket)
if method == "PUT":
    if os.environ.get("FAKE_S3_PUT_DENIED"):
        s3_error(403, "AccessDenied", "Access Denied")
    import hashlib

    body = open(data[1:], "rb").read() if data.startswith("@") else data.encode()
    if headers.get("x-amz-content-sha256") != hashlib.sha256(body).hexdigest():
        s3_error(400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.")
    path = os.path.join(store, key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        file.write(body)
    answer(200)

if "list-type" in query:
    if os.environ.get("FAKE_S3_LIST_DENIED"):
        s3_error(403, "AccessDenied", "Access Denied")
    prefix = query.get("prefix", "")
    keys = sorted(
        os.path.relpath(os.path.join(d, f), store)
        for d, _, files in os.walk(store)
        for f in files
    )
    keys = [k for k in keys if k.startswith(prefix)]
    start = int(query.get("continuation-token", "0"))
    page = int(os.environ.get("FAKE_S3_PAGE", "1000"))
    shown = keys[start : start + page]
    more = start + page < len(keys)
    items = "".join(
        f"<Contents><Key>{k}</Key><Size>{os.path.getsize(os.path.join(store, k))}</Size></Contents>" for k in shown
    )
    next_token = f"<NextContinuationToken>{start + page}</NextContinuationToken>" if more else ""
    answer(
        200,
        f'<ListBucketResult xmlns="{S3_NS}"><Name>{bucket}</Name><Prefix>{prefix}</Prefix><KeyCount>{len(shown)}</KeyCount>'
        f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>{items}{next_token}</ListBucketResult>",
    )

path = os.path.join(store, key)
if not os.path.isfile(path):
    s3_error(404, "NoSuchKey", "The specified key does not exist.")
answer(200, open(path, "rb").read())
