"""Scale-out past one engine: Ray actor pools (`omni synth --ray`, `omni bench --ray`)
and Ray-free sharding (`--shard I/N`) for Slurm arrays and Kubernetes indexed jobs.

Ray is an optional extra (`pip install "omnicli[ray]"`); nothing here imports it
at module level, so `omni` works without it and says how to install it.
"""
