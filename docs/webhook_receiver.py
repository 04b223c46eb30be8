"""A webhook receiver for trying pgwake: prints each delivery and checks its
Standard Webhooks signature.

    .venv/bin/python docs/webhook_receiver.py --port 9000 --secret whsec_...

Answers 204 (pgwake acks), or the status given with ``--status`` (try 500 to
watch retries with backoff, 410 to watch a message go dead at once).
"""

from __future__ import annotations

import argparse
import json

import uvicorn
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def build(secret: str | None, status: int) -> Starlette:
    verifier = None
    if secret:
        verifier = Webhook(secret if secret.startswith("whsec_") else secret.encode())

    async def hook(request: Request) -> Response:
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.startswith("webhook-")}
        verdict = "not checked (no --secret)"
        if verifier is not None:
            try:
                verifier.verify(body, dict(request.headers))
                verdict = "valid"
            except WebhookVerificationError as exc:
                verdict = f"INVALID ({exc})"
        print(
            json.dumps(
                {"headers": headers, "signature": verdict, "body": json.loads(body)}, indent=2
            ),
            flush=True,
        )
        return Response(status_code=status)

    return Starlette(routes=[Route("/hook", hook, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--secret", default=None, help="the secret given to pgwake")
    parser.add_argument("--status", type=int, default=204, help="HTTP status to answer")
    args = parser.parse_args()
    uvicorn.run(
        build(args.secret, args.status), host=args.host, port=args.port, log_level="warning"
    )


if __name__ == "__main__":
    main()
