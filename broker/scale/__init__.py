"""Scale-out: one executor for every many-scenario run (``executor``), the
sweep grid (``grid``) and the Parquet file of its rows (``table``); and the
pieces of one run that share its inputs on this machine's cores (``pool``:
the risk band's samples, the committed sweep's levels, the portfolio
bench's seeds)."""
