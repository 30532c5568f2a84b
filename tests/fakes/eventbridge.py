"""What moto's EventBridge needs to deliver an event as AWS does.

moto 5.2.5 builds the SQS message from a default input template that leaves
out the event's ``account`` (``moto.events.utils.EventTemplateParser``),
which AWS always sends (EventBridge User Guide, "Amazon EventBridge events":
``account`` is required). The daemon rejects events without our account, so
the tests' rules give their SQS target an input transformer that writes the
documented envelope, ``account`` included. The Terraform rules need none:
AWS delivers the whole event.
"""

from __future__ import annotations

__all__ = ["FULL_EVENT"]

_PATHS = {
    k: f"$.{k}"
    for k in ("account", "detail", "detail-type", "source", "id", "region", "resources", "time")
}
# moto's own template plus "account"; <time> is moto's epoch number, which its
# SQS target turns into ISO 8601 as it does for the default template.
_TEMPLATE = (
    '{"id": "<id>", "time": <time>, "version": "0", "detail-type": "<detail-type>", '
    '"source": "<source>", "account": "<account>", "region": "<region>", '
    '"resources": <resources>, "detail": <detail>}'
)
FULL_EVENT = {"InputPathsMap": _PATHS, "InputTemplate": _TEMPLATE}
