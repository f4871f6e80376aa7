// Validates Kubernetes objects against the API's OpenAPI schemas, offline:
// the validators kubernetes-models compiles from them (tools/lib/common.sh
// installs them, checked by SHA-256). Reads a JSON array of objects
// (tools/k8s/check renders and converts the manifests); prints one line per
// error and exits 1 if there is any.
//   node validate.mjs SCHEMAS_DIR OBJECTS.json [LABEL]
import { readFileSync, existsSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [schemasDir, objectsFile, label = objectsFile] = process.argv.slice(2);
const objects = JSON.parse(readFileSync(objectsFile, "utf8"));

// apps/v1 Deployment -> IoK8sApiAppsV1Deployment; v1 Service ->
// IoK8sApiCoreV1Service; networking.k8s.io/v1 -> IoK8sApiNetworkingV1...
function schemaName(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["core", apiVersion];
  const cap = (s) => s.charAt(0).toUpperCase() + s.slice(1);
  return `IoK8sApi${cap(group.split(".")[0])}${cap(version)}${kind}`;
}

let errors = 0;
for (const object of objects) {
  const where = `${label}: ${object?.kind ?? "?"} ${object?.metadata?.name ?? "?"}`;
  if (!object || typeof object.apiVersion !== "string" || typeof object.kind !== "string") {
    console.log(`${where}: no apiVersion or kind`);
    errors++;
    continue;
  }
  const file = `${schemasDir}/node_modules/kubernetes-models/_schemas/${schemaName(object.apiVersion, object.kind)}.js`;
  if (!existsSync(file)) {
    console.log(`${where}: no schema for ${object.apiVersion} ${object.kind}`);
    errors++;
    continue;
  }
  const { validate } = await import(pathToFileURL(file).href);
  if (!validate(object)) {
    for (const e of validate.errors) {
      console.log(`${where}: ${e.instancePath || "/"} ${e.keyword} ${JSON.stringify(e.params)}`);
      errors++;
    }
  }
}
console.log(`${label}: ${objects.length} objects, ${errors} errors`);
process.exit(errors === 0 ? 0 : 1);
