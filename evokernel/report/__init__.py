"""Reports of runs and sweeps from the library alone: terminal tables, PNG plots, one HTML file.

``collect`` gathers what a report shows through :mod:`evokernel.analysis`; ``plots`` draws it
with matplotlib (Agg); ``html`` renders one self-contained page with the plots inlined; ``text``
prints it; ``command`` is ``evokernel report``. Named ``reports`` while the run's progress printer
still lives in ``evokernel/report.py`` (the layout issue moves it to ``evokernel/run/``).
Import-light on purpose: nothing is imported here."""
