"""Running a fit: one training run (``train``), the model families and the choice between them
(``families``), the device and the callbacks a fit runs with (``runtime``), and the
input-pipeline benchmark (``bench``)."""
