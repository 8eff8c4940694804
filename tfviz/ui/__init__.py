"""The Streamlit front end of tfviz: one module per view, plus the sidebar and shared helpers.

app.py is the entry point; it imports the sidebar and the open view's module only, so a view
that is never opened costs nothing. Besides app.py this is the only place that imports
streamlit: the rest of tfviz is a library usable without it. Nothing is imported here, so that
importing one view does not import the others.
"""
