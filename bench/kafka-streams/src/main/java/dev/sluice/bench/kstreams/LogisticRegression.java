package dev.sluice.bench.kstreams;

/**
 * The bench's tiny logistic regression computed in Java: probability = sigmoid(x · w + b), in float32
 * as the ONNX graph (MatMul, Add, Sigmoid on FP32 tensors) computes it. The weights come from the bench
 * (the same constants the ONNX model is built from), so both sides do the same math.
 */
final class LogisticRegression {
  private final float[] weights;
  private final float bias;

  LogisticRegression(float[] weights, float bias) {
    this.weights = weights.clone();
    this.bias = bias;
  }

  int features() {
    return weights.length;
  }

  float probability(float[] x) {
    float z = 0f;
    for (int i = 0; i < weights.length; i++) z += x[i] * weights[i];
    z += bias;
    return (float) (1.0 / (1.0 + Math.exp(-z)));
  }
}
