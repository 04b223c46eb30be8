"""pgwake: a PostgreSQL-native scheduler, job queue and transactional outbox for asyncio."""

__version__ = "0.1.0"
