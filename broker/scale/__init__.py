"""Scale-out: one executor for every many-scenario run (``executor``), the
sweep grid (``grid``) and the Parquet file of its rows (``table``)."""
