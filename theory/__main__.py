from theory.run.cli import main

# Guarded as a precaution: sweep --workers N starts worker processes (Dask, multiprocessing "spawn"), and
# a spawned child may import the parent's main module.  (Dask's nanny does not re-run it today: checked.)
if __name__ == "__main__":
    raise SystemExit(main())
