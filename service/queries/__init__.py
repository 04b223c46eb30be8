"""Named SQL statements, one module per concern. No statement is written twice."""
