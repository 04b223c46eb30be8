"""Webhook delivery signed per Standard Webhooks (R-O4).

Headers ``webhook-id`` (the message id, stable across retries),
``webhook-timestamp`` (Unix seconds) and ``webhook-signature``
(``v1,`` + base64 HMAC-SHA256 of ``"{id}.{timestamp}.{body}"``). A ``whsec_``
secret is base64-decoded; any other secret is used as raw UTF-8 bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
import httpx
from standardwebhooks.webhooks import Webhook

from service.jobs import Job
from service.worker import DeadLetter

LEASE_MARGIN_SECONDS = 10.0


@dataclass(frozen=True)
class WebhookTarget:
    """Where and how an outbox delivers: ``url``, optional ``secret``, ``timeout`` seconds."""

    url: str
    secret: str | None = None
    timeout: float = 10.0


def signer(secret: str) -> Webhook:
    """A Standard Webhooks signer for ``secret`` (``whsec_<base64>`` or raw UTF-8)."""
    if secret.startswith("whsec_"):
        return Webhook(secret)
    return Webhook(secret.encode("utf-8"))


class WebhookDelivery:
    """A delivery callable for :meth:`service.outbox.Outbox.run`: POSTs the message payload.

    2xx acks; 410 Gone dead-letters at once; any other status, a connection error
    or a timeout (``target.timeout`` seconds for the whole exchange) raises, so the
    message is retried with the queue's backoff. A lease shorter than the timeout
    plus 10 s is extended first.
    """

    def __init__(self, target: WebhookTarget, client: httpx.AsyncClient) -> None:
        self.target = target
        self.client = client
        self._signer = signer(target.secret) if target.secret else None

    async def __call__(self, message: Job) -> None:
        timeout = self.target.timeout
        if message.lease_seconds < timeout + LEASE_MARGIN_SECONDS:
            # The lease must outlive the request, or another relay would send it again.
            await message.heartbeat(extend=timeout + LEASE_MARGIN_SECONDS)
        body = json.dumps(message.payload, ensure_ascii=False, separators=(",", ":"))
        msg_id = str(message.id)
        now = datetime.now(UTC)
        headers = {
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(now.timestamp())),
        }
        if self._signer is not None:
            headers["webhook-signature"] = self._signer.sign(msg_id, now, body)
        # httpx's timeout bounds each read; fail_after bounds the whole exchange, so a
        # receiver trickling bytes cannot hold the message past its lease.
        with anyio.fail_after(timeout):
            resp = await self.client.post(
                self.target.url, content=body.encode("utf-8"), headers=headers, timeout=timeout
            )
        if resp.status_code == 410:
            raise DeadLetter(f"HTTP 410 Gone from {self.target.url}")
        if not 200 <= resp.status_code < 300:
            raise RuntimeError(f"HTTP {resp.status_code} from {self.target.url}")
