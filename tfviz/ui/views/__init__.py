"""The app's views, one module per tab, each with render(view); app.py's VIEWS lists them."""
