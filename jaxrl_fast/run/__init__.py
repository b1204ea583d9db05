"""The host shell (DESIGN §2, layer 3): `train` compiles the loop once and runs it in chunks.

Beside it: what it returns (`result`), a run directory's files (`files`), the chunk log and
its checks (`chunk_log`), metrics (`metrics`), sweeps compiled once (`sweep`), the compiled
programs (`programs`), plots (`plot`) and the persistent compile cache (`compile_cache`).
"""
