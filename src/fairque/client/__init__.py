"""The clients: ``FairQueue`` (blocking), ``AsyncFairQueue`` (asyncio) and the flows both
run. Import them from ``fairque``; this package loads neither on its own."""
