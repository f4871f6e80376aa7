// The string formats the Kubernetes schemas of kubernetes-models check,
// standing in for @kubernetes-models/validate (whose own module pulls in
// ajv and its format packages for the same few checks).
const rBase64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// A resource quantity: apimachinery's pkg/api/resource/quantity.go.
const rQuantity = /^[+-]?(?:\d+|\d+\.\d+|\d+\.|\.\d+)(?:[KMGTPE]i|[YZEPTGMkhdcmunpfazy]|da|[eE][+-]?(?:\d+|\d+\.\d+|\d+\.|\.\d+))?$/;
const rDateTime = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)$/i;

const integerIn = (min, max) => (value) => Number.isInteger(value) && value >= min && value <= max;

export const formats = {
  int32: { type: "number", validate: integerIn(-(2 ** 31), 2 ** 31 - 1) },
  int64: { type: "number", validate: (value) => Number.isInteger(value) },
  double: { type: "number", validate: () => true },
  byte: { type: "string", validate: (value) => rBase64.test(value) },
  quantity: { type: "string", validate: rQuantity },
  "date-time": { type: "string", validate: (value) => rDateTime.test(value) },
};
