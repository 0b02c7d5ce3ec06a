from omnicli.cli import main

if __name__ == "__main__":  # vLLM spawns workers: the guard is required
    main()
