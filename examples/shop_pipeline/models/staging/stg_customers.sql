-- Customers, cleaned; merged by their key as the raw table changes, and each merge writes what it
-- changed to the model's change log (the logged_merge strategy), for the marts built on it.
{{ config(materialized='incremental', incremental_strategy='logged_merge', unique_key='customer_id', file_format='iceberg') }}
select customer_id, name, lower(trim(email)) as email, country, updated_at
from {{ source('raw', 'customers') }}
{% if is_incremental() %}
where updated_at > (select max(updated_at) from {{ this }})
{% endif %}
