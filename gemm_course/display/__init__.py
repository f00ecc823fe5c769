"""What the notebooks and the book display: the notebooks' facade, plots, diagrams, widgets, the glossary, the primer's helpers, the repository URL and the notebooks' install cell."""
