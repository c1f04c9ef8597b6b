import type { CommandModule } from "yargs";
import { buildOpenAPIDocument } from "../api/openapi.js";

/** `typed-eval openapi`: prints the OpenAPI 3.1 document of the v1 API. */
export const openapiCommand: CommandModule = {
  command: "openapi",
  describe: "Print the OpenAPI 3.1 document of the v1 API",
  handler: () => {
    process.stdout.write(`${JSON.stringify(buildOpenAPIDocument(), null, 2)}\n`);
  },
};
