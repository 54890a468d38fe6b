from .cli import app

app(prog_name="tilefarm")
