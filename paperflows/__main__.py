from paperflows.cli import app

app()
