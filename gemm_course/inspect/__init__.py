"""What the compiler made and how a warp touches memory: SASS, reading SASS, warp access profiles."""
