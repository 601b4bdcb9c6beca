"""Seeds and counts of the torch bridge's synthetic inputs, shared by profiling and
running (so that ``splitopt run`` rebuilds what ``splitopt profile`` measured)."""

#: seed of the synthetic run inputs (distinct from the calibration seed 1234 and BN seed 4321)
RUN_INPUT_SEED = 2024
#: calibration inputs of quantized plans: those of the instances (make_instances.py)
CALIBRATION_SEED = 1234
CALIBRATION_IMAGES = 8
#: the digits CNN of ``splitopt retrain`` (inputs: scikit-learn's digits test images)
DIGITS = "digits_cnn"
