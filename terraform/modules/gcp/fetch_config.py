"""Entrypoint of the daemon's container on GCP (stdlib only; runs in the image).

Reads the configuration secret named by SPOTFOLIO_CONFIG_SECRET
(projects/P/secrets/S/versions/latest) with the VM service account's token
from the metadata server, writes it to SPOTFOLIO_CONFIG_PATH with mode 0600,
then replaces itself with the command in argv[1:] (the daemon). Exits 1 with
one line on stderr if the secret cannot be read: the unit restarts it.
"""

import base64
import json
import os
import sys
import urllib.request

METADATA = os.environ.get("SPOTFOLIO_METADATA_URL", "http://metadata.google.internal")
SECRETS = os.environ.get("SPOTFOLIO_SECRETS_URL", "https://secretmanager.googleapis.com")


def _get(url, headers):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
        return json.loads(r.read())


def main(argv):
    if not argv:
        print("usage: fetch_config.py COMMAND...", file=sys.stderr)
        return 2
    name, path = os.environ["SPOTFOLIO_CONFIG_SECRET"], os.environ["SPOTFOLIO_CONFIG_PATH"]
    try:
        token = _get(
            METADATA + "/computeMetadata/v1/instance/service-accounts/default/token",
            {"Metadata-Flavor": "Google"},
        )["access_token"]
        reply = _get(SECRETS + "/v1/" + name + ":access", {"Authorization": "Bearer " + token})
        data = base64.b64decode(reply["payload"]["data"])
    except (OSError, KeyError, ValueError) as e:
        print(f"fetch_config: cannot read {name}: {e}", file=sys.stderr)
        return 1
    os.umask(0o077)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
