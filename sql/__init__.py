"""Schema migrations, shipped inside the wheel as the ``service.sql`` package."""
