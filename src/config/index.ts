export {
  type ConfigOrigin,
  DEFAULT_CONFIG_FILE,
  type DeepPartial,
  type LoadConfigOptions,
  loadConfig,
  loadConfigWithOrigin,
} from "./config-loader.js";
export {
  maxBatchSize,
  type SluiceConfig,
  type SluiceConfigInput,
  sluiceConfigSchema,
} from "./config-schema.js";
export { envNameFor } from "./env-overrides.js";
export { type ModelSettings, type ModelSettingsInput, modelSettings } from "./model-settings.js";
export { isSecretKey, MASK, maskSecrets } from "./secret-masking.js";
