"""The Starlette HTTP surface (R-H1–R-H3). Routes call the engine's public API only."""
